# runs the 'hermitian' group of tests/starfa_test
