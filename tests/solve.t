# runs the 'solve' group of tests/starfa_test
