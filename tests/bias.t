# runs the 'bias' group of tests/starfa_test
