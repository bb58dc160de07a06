# runs the 'sfa' group of tests/starfa_test
