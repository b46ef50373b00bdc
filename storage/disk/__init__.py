"""The storage shell: the only modules that open, write and fsync files. Not compiled."""
