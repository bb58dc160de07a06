# runs the 'spmm' group of tests/starfa_test
