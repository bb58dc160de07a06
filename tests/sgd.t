# runs the 'sgd' group of tests/starfa_test
