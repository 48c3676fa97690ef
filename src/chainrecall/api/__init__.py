"""The HTTP shell: routes, wire schemas and problem+json errors over `service.Memory`."""

from chainrecall.api.app import create_app

__all__ = ["create_app"]
