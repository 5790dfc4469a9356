-- Prosody for docker-compose: one virtual host and pingd's component.
-- Accounts: docker-compose exec prosody prosodyctl register alice localhost PASSWORD
local domain = os.getenv("XMPP_DOMAIN") or "localhost"

daemonize = false
pidfile = "/var/run/prosody/prosody.pid"
log = { { levels = { min = "info" }, to = "console" } }
data_path = "/var/lib/prosody"

admins = { }
modules_enabled = { "roster"; "saslauth"; "tls"; "disco"; "ping"; "register"; "posix" }
allow_registration = false
-- Clients reach Prosody from the host for trying it out; put TLS
-- certificates in place before exposing it anywhere else.
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_hashed"

component_ports = { 5347 }
component_interfaces = { "*" }

VirtualHost(domain)

Component("pubsub." .. domain)
    component_secret = os.getenv("PINGD_XMPP_SECRET")
