"""`harness modules`: every transport x role, and what each transport can do."""

from __future__ import annotations

from harness.cli.app import app, console


@app.command("modules")
def list_modules() -> None:
    """List every module (transport x role)."""
    from harness.errors import BadInput
    from harness.modules import TRANSPORTS, transport_class
    from harness.modules.interface.roles import ROLES

    width = max(map(len, TRANSPORTS)) + 1 + max(map(len, ROLES))
    for transport_name in TRANSPORTS:
        try:
            transport = transport_class(transport_name)
        except BadInput as exc:  # its client library is not installed
            console.print(f"  ({transport_name}: {exc.problem})", markup=False, style="dim")
            continue
        for role_name, role in ROLES.items():
            if transport.plays(role) and all(cap & transport.capabilities for cap in role.needs):
                console.print(f"{transport_name + '.' + role_name:<{width}} {role.summary}",
                              markup=False)
        features = ", ".join(c.name.lower().replace("_", " ") for c in type(
            transport.capabilities) if c in transport.capabilities)
        flavours = (f"; flavours {', '.join(transport.flavours)} (--flavour, the first the "
                    "default)" if transport.flavours else "")
        plugin = TRANSPORTS[transport_name].plugin
        source = f"; plug-in {plugin}" if plugin else ""
        console.print(f"  ({transport_name}: {transport.description}{flavours}; {features}"
                      f"{source})", markup=False, style="dim")


