"""Server and client interceptors, one concern per module.

Server order (outermost first), as ``server.create_server`` installs them:
request id → tracing → metrics → deadline → errors. Errors is innermost so the
others observe the final status code of a mapped exception.
"""
