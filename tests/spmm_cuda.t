# runs the 'spmm_cuda' group of tests/starfa_test
