"""memledger's REST API (FastAPI): `create_app(home_or_settings)` builds one instance."""

from memledger.api.app import create_app
from memledger.api.settings import ApiSettings

__all__ = ["ApiSettings", "create_app"]
