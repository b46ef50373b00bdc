"""Configuration and entry points: zoo.cfg, ``trizk-server``, the docker entry point."""
