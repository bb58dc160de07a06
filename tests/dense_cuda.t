# runs the 'dense_cuda' group of tests/starfa_test
