# Who may talk to whom. Only the load balancer is reachable from outside, and
# only on port 80; it reaches only the front ends' data port. Every
# control-plane port (controller, front-end and app-server control
# listeners) admits traffic only from the cluster's own security groups,
# never from a CIDR block. Every group may send anywhere: instances fetch
# packages at boot and reach DynamoDB and SSM (Parameter Store, Session
# Manager) through NAT.

resource "aws_security_group" "lb" {
  name        = "${var.name}-lb"
  description = "Public load balancer: port 80 in, front-end data port out"
  vpc_id      = local.vpc_id
  tags        = { Name = "${var.name}-lb" }
}

resource "aws_security_group" "frontend" {
  name        = "${var.name}-frontend"
  description = "Chopper front ends"
  vpc_id      = local.vpc_id
  tags        = { Name = "${var.name}-frontend" }
}

resource "aws_security_group" "appserver" {
  name        = "${var.name}-appserver"
  description = "Chopper app servers"
  vpc_id      = local.vpc_id
  tags        = { Name = "${var.name}-appserver" }
}

resource "aws_security_group" "controller" {
  name        = "${var.name}-controller"
  description = "Chopper controllers"
  vpc_id      = local.vpc_id
  tags        = { Name = "${var.name}-controller" }
}

resource "aws_security_group" "load_driver" {
  name        = "${var.name}-load-driver"
  description = "Load driver: no inbound traffic unless SSH is enabled"
  vpc_id      = local.vpc_id
  tags        = { Name = "${var.name}-load-driver" }
}

# --- Load balancer -------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "lb_http" {
  for_each = toset(var.allowed_ingress_cidrs)

  security_group_id = aws_security_group.lb.id
  description       = "HTTP from allowed clients"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 80
  to_port           = 80
}

# Forwarded requests and the /healthz checks both use this one path.
resource "aws_vpc_security_group_egress_rule" "lb_to_frontend" {
  security_group_id            = aws_security_group.lb.id
  description                  = "Front-end data port (traffic and health checks)"
  referenced_security_group_id = aws_security_group.frontend.id
  ip_protocol                  = "tcp"
  from_port                    = var.frontend_port
  to_port                      = var.frontend_port
}

# --- Front ends ----------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "frontend_data_from_lb" {
  security_group_id            = aws_security_group.frontend.id
  description                  = "Data port from the load balancer"
  referenced_security_group_id = aws_security_group.lb.id
  ip_protocol                  = "tcp"
  from_port                    = var.frontend_port
  to_port                      = var.frontend_port
}

# The paper's load driver spreads requests over the front ends directly.
resource "aws_vpc_security_group_ingress_rule" "frontend_data_from_load_driver" {
  security_group_id            = aws_security_group.frontend.id
  description                  = "Data port from the load driver"
  referenced_security_group_id = aws_security_group.load_driver.id
  ip_protocol                  = "tcp"
  from_port                    = var.frontend_port
  to_port                      = var.frontend_port
}

resource "aws_vpc_security_group_ingress_rule" "frontend_control_from_controller" {
  security_group_id            = aws_security_group.frontend.id
  description                  = "Control port: assignment pushes from the controller"
  referenced_security_group_id = aws_security_group.controller.id
  ip_protocol                  = "tcp"
  from_port                    = var.frontend_control_port
  to_port                      = var.frontend_control_port
}

# --- App servers -----------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "appserver_data_from_frontend" {
  security_group_id            = aws_security_group.appserver.id
  description                  = "Data port: requests forwarded by the front ends"
  referenced_security_group_id = aws_security_group.frontend.id
  ip_protocol                  = "tcp"
  from_port                    = var.app_port
  to_port                      = var.app_port
}

resource "aws_vpc_security_group_ingress_rule" "appserver_control_from_controller" {
  security_group_id            = aws_security_group.appserver.id
  description                  = "Control port: assignment pushes and load reads from the controller"
  referenced_security_group_id = aws_security_group.controller.id
  ip_protocol                  = "tcp"
  from_port                    = var.app_control_port
  to_port                      = var.app_control_port
}

# --- Controllers -----------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "controller_from_frontend" {
  security_group_id            = aws_security_group.controller.id
  description                  = "Registrations and load reports from the front ends"
  referenced_security_group_id = aws_security_group.frontend.id
  ip_protocol                  = "tcp"
  from_port                    = var.controller_port
  to_port                      = var.controller_port
}

resource "aws_vpc_security_group_ingress_rule" "controller_from_appserver" {
  security_group_id            = aws_security_group.controller.id
  description                  = "Registrations and load reports from the app servers"
  referenced_security_group_id = aws_security_group.appserver.id
  ip_protocol                  = "tcp"
  from_port                    = var.controller_port
  to_port                      = var.controller_port
}

# Experiments read /v1/status (imbalance, assignment) while they run. The
# controllers need no rule between themselves: they meet only in the state
# table, through DynamoDB.
resource "aws_vpc_security_group_ingress_rule" "controller_from_load_driver" {
  security_group_id            = aws_security_group.controller.id
  description                  = "Status reads from the load driver during experiments"
  referenced_security_group_id = aws_security_group.load_driver.id
  ip_protocol                  = "tcp"
  from_port                    = var.controller_port
  to_port                      = var.controller_port
}

# --- Load driver -----------------------------------------------------------------

resource "aws_vpc_security_group_ingress_rule" "load_driver_ssh" {
  for_each = toset(local.ssh_ingress_cidrs)

  security_group_id = aws_security_group.load_driver.id
  description       = "SSH (off unless ssh_key_name and ssh_cidr_blocks are set)"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
}

# --- Egress ----------------------------------------------------------------------

resource "aws_vpc_security_group_egress_rule" "all" {
  for_each = {
    frontend    = aws_security_group.frontend.id
    appserver   = aws_security_group.appserver.id
    controller  = aws_security_group.controller.id
    load_driver = aws_security_group.load_driver.id
  }

  security_group_id = each.value
  description       = "All outbound (packages, DynamoDB, SSM, cluster peers)"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}
