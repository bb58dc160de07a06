# runs the 'ccd' group of tests/starfa_test
