"""memledger's REST API (FastAPI): `create_app(home_or_settings)` builds one instance."""

from memledger.node.api.app import create_app
from memledger.node.api.settings import ApiSettings

__all__ = ["ApiSettings", "create_app"]
