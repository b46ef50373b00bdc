"""zoo.cfg, the command line, the docker entry point."""
