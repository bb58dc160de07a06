# runs the 'gap_cuda' group of tests/starfa_test
