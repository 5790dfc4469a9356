package store

// TestPostgresURL gives the external tests the per-test PostgreSQL schema.
var TestPostgresURL = testPostgresURL

// SkipWithoutPostgres skips a test when PINGD_TEST_POSTGRES is not set.
var SkipWithoutPostgres = skipWithoutPostgres
