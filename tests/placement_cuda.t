# runs the 'placement_cuda' group of tests/starfa_test
