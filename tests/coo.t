# runs the 'coo' group of tests/starfa_test
