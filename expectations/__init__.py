"""Great Expectations suites built from the public schema (GX is imported lazily)."""
