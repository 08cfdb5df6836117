"""The compatibility layer: import names of the vendor's packages (`rknn.api`, `rknn.utils`,
`rknnlite.api`) written into an environment as small modules that forward to rknnrt, so that
unchanged scripts run (`rknnrt compat install`; docs/toolkit2.md)."""
