# Boot scripts: templates/common.sh.tftpl (Node, the project, the systemd
# helper, the Parameter Store reader) followed by the component's own
# template. Each component's environment file is built here from a map whose
# keys are exactly the variables its entry point reads (core/settings.js
# ENV); the offline test checks every key against that table, and the ports
# against DEFAULT_PORTS. What differs per instance (its id and address) and
# the cluster token are added at boot, so no secret is in user_data.

locals {
  # Members get every controller, comma-separated, and follow whichever
  # leads (core/controller-client.js). The offline test pins this expression
  # and has terraform evaluate it.
  controller_urls = join(",", [for ip in aws_instance.controller[*].private_ip : "http://${ip}:${var.controller_port}"])

  # Set explicitly wherever a component uses DynamoDB. Unset also means AWS
  # today, but an in-process stand-in (dynalite) was once the default, and
  # for the controllers that would mean one private state store each and as
  # many leaders: the deployment does not rely on the default. A
  # non-loopback endpoint makes the SDK use the instance profile's
  # credentials, as the default endpoint would.
  dynamodb_endpoint = "https://dynamodb.${var.region}.${data.aws_partition.current.dns_suffix}"

  # CHOPPER_CONTROLLER_ID, CHOPPER_ADVERTISE_HOST (the address published in
  # the leader lease) and CHOPPER_CLUSTER_TOKEN are appended at boot.
  controller_env = {
    CHOPPER_CONTROLLER_HOST = "0.0.0.0"
    CHOPPER_CONTROLLER_PORT = var.controller_port
    CHOPPER_STRATEGY        = var.strategy
    CHOPPER_PERIOD_MS       = var.balance_period_ms
    CHOPPER_STATE_TABLE     = aws_dynamodb_table.controller_state.name
    CHOPPER_STATE_ENDPOINT  = local.dynamodb_endpoint
    AWS_REGION              = var.region
    LOG_LEVEL               = var.log_level
  }

  # CHOPPER_FRONTEND_ID, CHOPPER_ADVERTISE_HOST and CHOPPER_CLUSTER_TOKEN
  # are appended at boot.
  frontend_env = {
    CHOPPER_CONTROLLER_URL        = local.controller_urls
    CHOPPER_FRONTEND_HOST         = "0.0.0.0"
    CHOPPER_FRONTEND_PORT         = var.frontend_port
    CHOPPER_FRONTEND_CONTROL_PORT = var.frontend_control_port
    LOG_LEVEL                     = var.log_level
  }

  # CHOPPER_SERVER_ID, CHOPPER_ADVERTISE_HOST and CHOPPER_CLUSTER_TOKEN are
  # appended at boot too.
  appserver_env = {
    CHOPPER_APP              = var.app
    CHOPPER_CONTROLLER_URL   = local.controller_urls
    CHOPPER_APP_HOST         = "0.0.0.0"
    CHOPPER_APP_PORT         = var.app_port
    CHOPPER_APP_CONTROL_PORT = var.app_control_port
    LOG_LEVEL                = var.log_level
  }

  # kv-cache only.
  kv_cache_env = {
    CHOPPER_DDB_TABLE    = aws_dynamodb_table.kv.name
    CHOPPER_DDB_ENDPOINT = local.dynamodb_endpoint
    AWS_REGION           = var.region
    REDIS_URL            = local.redis_url
  }

  # The token's parameter name, not its value: each instance reads the
  # value at boot with its own role.
  controller_template_vars = {
    env_file                = join("\n", [for k, v in local.controller_env : "${k}=${v}"])
    cluster_token_parameter = aws_ssm_parameter.cluster_token.name
  }

  frontend_template_vars = {
    env_file                = join("\n", [for k, v in local.frontend_env : "${k}=${v}"])
    cluster_token_parameter = aws_ssm_parameter.cluster_token.name
  }

  appserver_template_vars = {
    app = var.app
    env_file = join("\n", concat(
      [for k, v in local.appserver_env : "${k}=${v}"],
      [for k, v in local.kv_cache_env : "${k}=${v}" if local.kv_cache]
    ))
    cluster_token_parameter = aws_ssm_parameter.cluster_token.name
  }

  load_driver_template_vars = {
    public_url      = "http://${aws_lb.frontend.dns_name}"
    controller_urls = local.controller_urls
    frontend_port   = var.frontend_port
    app             = var.app
  }

  common_user_data = templatefile("${path.module}/templates/common.sh.tftpl", local.common_template_vars)

  controller_user_data  = join("\n", [local.common_user_data, templatefile("${path.module}/templates/controller.sh.tftpl", local.controller_template_vars)])
  frontend_user_data    = join("\n", [local.common_user_data, templatefile("${path.module}/templates/frontend.sh.tftpl", local.frontend_template_vars)])
  appserver_user_data   = join("\n", [local.common_user_data, templatefile("${path.module}/templates/appserver.sh.tftpl", local.appserver_template_vars)])
  load_driver_user_data = join("\n", [local.common_user_data, templatefile("${path.module}/templates/load-driver.sh.tftpl", local.load_driver_template_vars)])
}
