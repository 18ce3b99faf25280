import os
from hypothesis import settings
if os.environ.get("AUDIT_HUNT"):
    settings.register_profile("hunt", max_examples=int(os.environ["AUDIT_HUNT"]), deadline=None)
    settings.load_profile("hunt")
