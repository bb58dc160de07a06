# runs the 'sfa_cuda' group of tests/starfa_test
