# runs the 'readers' group of tests/starfa_test
