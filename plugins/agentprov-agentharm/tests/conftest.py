def pytest_configure(config):
    config.addinivalue_line("markers", "req(rid): the R-id(s) this test proves")
