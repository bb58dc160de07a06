# runs the 'als_cuda' group of tests/starfa_test
