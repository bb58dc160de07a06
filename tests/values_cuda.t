# runs the 'values_cuda' group of tests/starfa_test
