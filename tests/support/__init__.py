"""What tests share, imported as ``tests.support.<module>`` (the repository root is on sys.path through
pytest's ``pythonpath``): helpers and fakes, and Procrastinate apps that subprocesses load by dotted path.
Test modules never import each other; what two of them need lives here or in a conftest.py."""
