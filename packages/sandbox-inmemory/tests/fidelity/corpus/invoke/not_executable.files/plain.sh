echo should not run
