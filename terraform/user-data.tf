# Boot scripts: templates/common.sh.tftpl (Node, the project, the systemd
# helper) followed by the component's own template. Each component's
# environment file is built here from a map whose keys are exactly the
# variables its entry point reads (core/settings.js ENV); the offline test
# checks every key against that table, and the ports against DEFAULT_PORTS.

locals {
  # Front ends and app servers register with the first controller; extra
  # controllers (controller_count > 1) get no registrations and stay idle.
  # Standby promotion will only need to change this address.
  controller_url = "http://${aws_instance.controller[0].private_ip}:${var.controller_port}"

  controller_env = {
    CHOPPER_CONTROLLER_HOST = "0.0.0.0"
    CHOPPER_CONTROLLER_PORT = var.controller_port
    CHOPPER_STRATEGY        = var.strategy
    CHOPPER_PERIOD_MS       = var.balance_period_ms
    LOG_LEVEL               = var.log_level
  }

  # CHOPPER_FRONTEND_ID and CHOPPER_ADVERTISE_HOST are per instance: the
  # template appends them at boot from the instance metadata.
  frontend_env = {
    CHOPPER_CONTROLLER_URL        = local.controller_url
    CHOPPER_FRONTEND_HOST         = "0.0.0.0"
    CHOPPER_FRONTEND_PORT         = var.frontend_port
    CHOPPER_FRONTEND_CONTROL_PORT = var.frontend_control_port
    LOG_LEVEL                     = var.log_level
  }

  # CHOPPER_SERVER_ID and CHOPPER_ADVERTISE_HOST are appended at boot too.
  appserver_env = {
    CHOPPER_APP              = var.app
    CHOPPER_CONTROLLER_URL   = local.controller_url
    CHOPPER_APP_HOST         = "0.0.0.0"
    CHOPPER_APP_PORT         = var.app_port
    CHOPPER_APP_CONTROL_PORT = var.app_control_port
    LOG_LEVEL                = var.log_level
  }

  # kv-cache only. The endpoint is set explicitly: bin/appserver.js treats
  # an unset CHOPPER_DDB_ENDPOINT as "no DynamoDB" and starts a private
  # in-process dynalite on each app server (apps/index.js prepareShared).
  # A non-loopback endpoint makes the SDK use the instance profile's
  # credentials, as the default endpoint would.
  kv_cache_env = {
    CHOPPER_DDB_TABLE    = aws_dynamodb_table.kv.name
    CHOPPER_DDB_ENDPOINT = "https://dynamodb.${var.region}.${data.aws_partition.current.dns_suffix}"
    AWS_REGION           = var.region
    REDIS_URL            = local.redis_url
  }

  controller_template_vars = {
    env_file = join("\n", [for k, v in local.controller_env : "${k}=${v}"])
  }

  frontend_template_vars = {
    env_file = join("\n", [for k, v in local.frontend_env : "${k}=${v}"])
  }

  appserver_template_vars = {
    app = var.app
    env_file = join("\n", concat(
      [for k, v in local.appserver_env : "${k}=${v}"],
      [for k, v in local.kv_cache_env : "${k}=${v}" if local.kv_cache]
    ))
  }

  load_driver_template_vars = {
    public_url     = "http://${aws_lb.frontend.dns_name}"
    controller_url = local.controller_url
    frontend_port  = var.frontend_port
    app            = var.app
  }

  common_user_data = templatefile("${path.module}/templates/common.sh.tftpl", local.common_template_vars)

  controller_user_data  = join("\n", [local.common_user_data, templatefile("${path.module}/templates/controller.sh.tftpl", local.controller_template_vars)])
  frontend_user_data    = join("\n", [local.common_user_data, templatefile("${path.module}/templates/frontend.sh.tftpl", local.frontend_template_vars)])
  appserver_user_data   = join("\n", [local.common_user_data, templatefile("${path.module}/templates/appserver.sh.tftpl", local.appserver_template_vars)])
  load_driver_user_data = join("\n", [local.common_user_data, templatefile("${path.module}/templates/load-driver.sh.tftpl", local.load_driver_template_vars)])
}
