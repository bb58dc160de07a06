# runs the 'gram' group of tests/starfa_test
