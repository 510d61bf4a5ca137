"""Test support shipped with the package: the store contract suite every backend's tests reuse.

Importing `evidex.testing.store_contract` needs pytest (the `dev` extra); nothing else in evidex does.
"""
