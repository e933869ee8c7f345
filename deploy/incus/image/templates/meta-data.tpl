instance-id: {{ instance.name }}
local-hostname: {{ instance.name }}
