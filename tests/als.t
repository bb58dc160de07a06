# runs the 'als' group of tests/starfa_test
