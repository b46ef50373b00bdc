"""Authentication and authorisation: ACLs, auth providers, SASL. Pure (compiled with mypyc)."""
