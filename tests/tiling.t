# runs the 'tiling' group of tests/starfa_test
