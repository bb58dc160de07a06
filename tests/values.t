# runs the 'values' group of tests/starfa_test
