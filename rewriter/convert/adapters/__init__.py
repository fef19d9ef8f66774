"""Adapters by op family: importing this package imports every module in it, and each
module's ``@register`` decorators fill :data:`rewriter.convert.registry.ADAPTERS`."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
