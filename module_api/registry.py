"""``mx.registry``: name -> class tables that ``create`` functions read.

mxnet 1.9.1 keeps one table per base class (initializers, metrics ...) and
makes each family's ``register``, ``alias`` and ``create`` from it; programs
call the families' functions (``mx.init.register``, ``mx.metric.create``)
and, rarely, these factories directly. Names are case-insensitive.

``create`` accepts what the families' ``dumps()`` / ``get_config()`` write, so
a stored spec builds the same object again:

- an instance of the base class (returned as it is);
- a registered name, followed by the constructor's arguments;
- a dict of keyword arguments, the name under the family's nickname key;
- JSON text of ``[name, {kwargs}]`` or of such a dict.

Errors keep the exception types programs catch: mxnet asserts, and the
families here raised ``TypeError`` / ``ValueError``; the classes below are both.
"""
import json
import warnings

__all__ = ["get_registry", "get_register_func", "get_alias_func", "get_create_func"]

# base class -> {lower-cased name: class}
_TABLES = {}


class RegistryTypeError(TypeError, AssertionError):
    """A spec or a registered class of the wrong type."""


class NotRegisteredError(ValueError, AssertionError):
    """A name no class was registered under."""


def _table(base_class):
    return _TABLES.setdefault(base_class, {})


def get_registry(base_class):
    """A copy of the ``{name: class}`` table of ``base_class``.

    Parameters
    ----------
    base_class : type

    Returns
    -------
    dict of str to type
    """
    return dict(_table(base_class))


def get_register_func(base_class, nickname):
    """The ``register(klass, name=None)`` function of a family.

    Parameters
    ----------
    base_class : type
        Only its subclasses may be registered.
    nickname : str
        The family's name in messages (``'initializer'``, ``'metric'``).

    Returns
    -------
    callable
        ``register(klass, name=None)``: registers ``klass`` under ``name``
        (default: its class name), lower-cased, and returns it, so it serves as
        a class decorator. Registering another class under a taken name warns.
    """
    table = _table(base_class)

    def register(klass, name=None):
        if not (isinstance(klass, type) and issubclass(klass, base_class)):
            raise RegistryTypeError(f"Can only register subclass of {base_class.__name__}, "
                                    f"got {klass!r}")
        key = (klass.__name__ if name is None else name).lower()
        taken = table.get(key)
        if taken is not None and taken is not klass:
            warnings.warn(f"New {nickname} {klass.__module__}.{klass.__name__} registered "
                          f"with name {key} is overriding existing {nickname} "
                          f"{taken.__module__}.{taken.__name__}", UserWarning, stacklevel=2)
        table[key] = klass
        return klass

    register.__doc__ = f"Register a subclass of {base_class.__name__} for {nickname} create()."
    return register


def get_alias_func(base_class, nickname):
    """The ``alias(*names)`` class decorator of a family: it registers the class
    under each of ``names`` as well.

    Parameters
    ----------
    base_class : type
    nickname : str

    Returns
    -------
    callable
    """
    register = get_register_func(base_class, nickname)

    def alias(*names):
        def register_names(klass):
            for name in names:
                register(klass, name)
            return klass
        return register_names

    alias.__doc__ = f"Register a {nickname} class under more names."
    return alias


def get_create_func(base_class, nickname):
    """The ``create(spec, *args, **kwargs)`` function of a family.

    Parameters
    ----------
    base_class : type
    nickname : str
        Also the key of the name in a dict spec (``{'initializer': 'xavier'}``).

    Returns
    -------
    callable
        ``create``: an instance from any spec the module docstring lists.
    """
    table = _table(base_class)

    def no_more(args, kwargs, what):
        if args or kwargs:
            raise AssertionError(f"{nickname} is already {what}. Additional arguments are "
                                 f"invalid (got {args!r}, {kwargs!r})")

    def create(*args, **kwargs):
        if args:
            spec, args = args[0], args[1:]
        else:
            spec = kwargs.pop(nickname)
        if isinstance(spec, base_class):
            no_more(args, kwargs, "an instance")
            return spec
        if isinstance(spec, dict):
            return create(**spec)
        if not isinstance(spec, str):
            raise RegistryTypeError(
                f"{nickname} must be of string type (a registered name or JSON), an instance "
                f"of {base_class.__name__} or a dict; got {type(spec).__name__}")
        if spec.startswith("["):
            no_more(args, kwargs, "given as JSON text")
            name, named = json.loads(spec)
            return create(name, **named)
        if spec.startswith("{"):
            no_more(args, kwargs, "given as JSON text")
            return create(**json.loads(spec))
        key = spec.lower()
        if key not in table:
            raise NotRegisteredError(
                f"{key} is not registered. Please register with {nickname}.register first "
                f"(registered: {', '.join(sorted(table))})")
        return table[key](*args, **kwargs)

    create.__doc__ = f"Create a {nickname} from a name, a dict, JSON text or an instance."
    return create
