# runs the 'sgd_cuda' group of tests/starfa_test
