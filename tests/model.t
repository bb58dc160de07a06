# runs the 'model' group of tests/starfa_test
