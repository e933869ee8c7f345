{{ config_get("cloud-init.user-data", "") }}
