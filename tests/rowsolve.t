# runs the 'rowsolve' group of tests/starfa_test
