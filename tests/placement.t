# runs the 'placement' group of tests/starfa_test
