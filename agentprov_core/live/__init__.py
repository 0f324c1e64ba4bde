"""(described in docs/architecture.md)"""
