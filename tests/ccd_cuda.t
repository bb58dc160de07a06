# runs the 'ccd_cuda' group of tests/starfa_test
