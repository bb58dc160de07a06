# runs the 'dense' group of tests/starfa_test
