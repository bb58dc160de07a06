# runs the 'gap' group of tests/starfa_test
